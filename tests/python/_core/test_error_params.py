"""Library errors name the library's own parameters as fields; the CLI shows the flag, R the
argument, all from one table (quantformer._core.parameters), whatever module raised them."""

import pytest
from quantformer._core.errors import InputError
from quantformer._core.parameters import cli_flag, r_argument
from quantformer.io.frames import detect_format, read_frame
from quantformer.io.writable import check_output_file
from quantformer.io.writable import check_model_dir
from quantformer.models.hub import resolve_device
from quantformer.models.onnx.backend import check_backend
from quantformer.models.tasks import make_task
from quantformer.io.writable import check_job_dir as check_partition_out
from quantformer.scale.dask import list_partitions, parse_scheduler
from quantformer.select.common import check_sizes
from quantformer.select.compare import parse_models
from quantformer.select.methods import compare_kwargs, method_kwargs
from quantformer.models.arguments import check_arguments
from quantformer.train.baselines import check_folds
from quantformer.train.spec import check_method_options


def _error(fn, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        fn(*args, **kwargs)
    return info.value


def _three(error: InputError, r_args=None) -> tuple[str, str, str]:
    """The message as Python, the CLI and R show it."""
    return (str(error), error.render(cli_flag),
            error.render(lambda p: r_argument(p, r_args)))


def test_training_options_render_as_parameter_flag_and_r_argument():
    e = _error(make_task, "regression", labels=["a", "b"])
    assert e.params == ("labels", "task")
    assert _three(e, ["x", "y", "task"]) == (
        "labels orders classes and has no meaning for task regression; leave it out",
        "--labels orders classes and has no meaning for --task regression; leave it out",
        "`y` orders classes and has no meaning for `task` regression; leave it out")
    e = _error(make_task, "multilabel")
    assert str(e).startswith("task multilabel needs either label_cols A,B,C")
    assert e.render(cli_flag).startswith("--task multilabel needs either --label-cols A,B,C")
    e = _error(check_arguments, batch_size=0)
    assert _three(e)[:2] == ("batch_size must be a whole number greater than 0, not 0",
                             "--batch-size must be a whole number greater than 0, not 0")
    e = _error(check_arguments, max_length=0)  # the one --max-length rule (models.hub)
    assert _three(e)[:2] == (
        "max_length must be a whole number of tokens of at least 8 (special tokens included), "
        "not 0", "--max-length must be a whole number of tokens of at least 8 (special tokens "
        "included), not 0")
    e = _error(check_arguments, valid_fraction=1.5)
    assert e.render(lambda p: r_argument(p, ["validation"])) == \
        "`validation` must be in [0, 1), not 1.5"


def test_select_and_nli_options_name_their_parameters():
    e = _error(check_sizes, "5,x", 10)  # was named "----train-sizes" on the command line
    assert e.render(cli_flag) == \
        "--train-sizes must be comma-separated whole numbers greater than 0; 'x' is not"
    e = _error(check_sizes, [5, 20], 10)
    assert e.params == ("train_sizes",) and str(e).startswith("train_sizes 20 is larger")
    assert _error(parse_models, "svm-bow,svm-bow").render(cli_flag) == \
        "--models names a model twice; list each once"
    e = _error(method_kwargs, "setfit", oversample=0.5)
    assert str(e).startswith("oversample cannot be used with method setfit (")
    e = _error(check_method_options, "standard", "About {}.", None, "all")
    assert _three(e) == (
        ("hypothesis, nli_pairs is for method nli; add method nli (with an NLI model) or leave "
         "it out"),
        ("--hypothesis, --nli-pairs is for --method nli; add --method nli (with an NLI --model) "
         "or leave it out"),
        ("`hypothesis`, `nli_pairs` is for `method` nli; add `method` nli (with an NLI `model`) "
         "or leave it out"))
    e = _error(compare_kwargs, ["svm-bow"], model=None, labels=["a", "b"], hypothesis="{}")
    assert e.render(cli_flag) == ("--hypothesis is for compare's nli model; add nli to "
                                  "--models (with an NLI --model) or leave it out")
    e = _error(check_folds, ["a"] * 5 + ["b"] * 2, 4)
    assert e.params == ("folds",) and e.render(cli_flag).endswith("; use --folds 2 or fewer")


def test_io_errors_name_their_parameters(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("id,body\n1,hello\n", encoding="utf-8")
    e = _error(read_frame, f)
    assert e.params == ("text_col",)
    assert _three(e, ["x", "text_field"])[1:] == (
        (f"'{f}' has no 'text' column; its columns are: id, body. Name the text column with "
         "--text-col"),
        (f"'{f}' has no 'text' column; its columns are: id, body. Name the text column with "
         "`text_field`"))
    e = _error(read_frame, f, text_col="body", label_col="labels.txt")
    assert e.params == ("label_col", "labels_file")
    assert e.render(cli_flag).endswith("'labels.txt' looks like a file: --label-col takes a "
                                       "column name; for labels in a file of their own (one a "
                                       "line, in document order) pass --labels-file labels.txt")
    e = _error(detect_format, tmp_path / "c.xyz")
    assert e.params == ("fmt",) and e.render(cli_flag).endswith(", or pass --format")
    assert e.render(lambda p: r_argument(p, ["format"])).endswith(", or pass `format`")
    out = tmp_path / "o.csv"
    out.write_text("x")
    assert _three(_error(check_output_file, out, overwrite=False), ["output_dir"]) == (
        f"'{out}' exists; pass overwrite or choose another file name",
        f"'{out}' exists; pass --overwrite or choose another file name",
        f"'{out}' exists; pass `overwrite = TRUE` or choose another file name")
    assert _error(check_model_dir, out).render(cli_flag) == \
        f"--out '{out}' is a file; give a folder name for the model"


def test_device_backend_and_partition_errors_name_their_parameters(tmp_path):
    assert _error(resolve_device, "tpu").render(cli_flag) == \
        "unknown --device 'tpu'; use auto, cpu, cuda, cuda:N or mps"
    e = _error(check_backend, "torch", "int8")
    assert e.params == ("quantize", "backend")
    assert e.render(cli_flag) == ("--quantize int8 needs --backend onnx (ONNX Runtime's int8 "
                                  "kernels); add --backend onnx or drop --quantize")
    e = _error(list_partitions, [str(tmp_path / "none*.parquet")])
    assert e.params == ("inputs",) and str(e).startswith("inputs '")
    assert e.render(cli_flag).startswith("--input '")  # the library's inputs is --input
    assert _error(parse_scheduler, "nowhere").render(cli_flag).startswith(
        "--scheduler 'nowhere' is not understood")
    out = tmp_path / "out"
    out.mkdir()
    (out / "x.parquet").write_text("x")
    e = _error(check_partition_out, out, resume=False)
    assert e.render(cli_flag) == (f"--out '{out}' exists and is not empty; pass --resume to "
                                  "continue the job recorded in its manifest.json, or choose a "
                                  "new --out")
