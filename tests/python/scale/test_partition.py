"""``quantformer partition`` (issue 27, point 10): one big file into Parquet partitions that
the partitioned path reads as the one file."""

from __future__ import annotations

import pandas as pd
import pytest
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.scale.dask import list_partitions, scan_partitions
from quantformer.scale.partition import partition_file


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_partitions_keep_rows_columns_and_order(tmp_path, ext, capsys):
    frame = toy_frame(25).drop(columns="doc_id")  # default ids text1..text25
    src = tmp_path / f"big{ext}"
    frame.to_csv(src, index=False) if ext == ".csv" else frame.to_parquet(src, row_group_size=7)
    assert main(["partition", "--input", str(src), "--rows", "10", "--out",
                 str(tmp_path / "parts")]) == 0
    assert "wrote 3 partition(s) of at most 10 rows" in capsys.readouterr().out
    parts = list_partitions(str(tmp_path / "parts"))
    assert [p.name for p in parts] == ["big-00001.parquet", "big-00002.parquet",
                                       "big-00003.parquet"]
    pieces = [pd.read_parquet(p) for p in parts]
    assert [len(x) for x in pieces] == [10, 10, 5]
    pd.testing.assert_frame_equal(pd.concat(pieces, ignore_index=True), frame,
                                  check_dtype=False)
    # the partitioned path numbers default ids across partitions as in the one file
    rows, offsets = scan_partitions(parts, {})
    assert (rows, offsets) == ([10, 10, 5], [0, 10, 20])


def test_partition_refuses_before_writing(tmp_path, capsys):
    src = tmp_path / "big.csv"
    toy_frame(5).to_csv(src, index=False)
    out = tmp_path / "parts"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main(["partition", "--input", str(src), "--rows", "2", "--out", str(out)]) == 2
    assert f"--out '{out}' exists and is not empty; pass --overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert main(["partition", "--input", str(src), "--rows", "0", "--out", str(out)]) == 2
    assert "argument --rows: must be greater than 0, not 0" in capsys.readouterr().err
    with pytest.raises(InputError, match="rows must be a whole number of rows of at least 1"):
        partition_file(src, tmp_path / "p2", rows=0)
    assert main(["partition", "--input", str(src), "--rows", "2", "--out", str(out),
                 "--overwrite"]) == 0
    assert len(list(out.iterdir())) == 3


def test_partitions_without_ids_are_numbered_with_one_warning(tmp_path):
    """Issue 36: a corpus without ids got text1..N silently; one warning for the run, not one
    per partition (nor per chunk of a partition)."""
    from quantformer._core.errors import ParamWarning
    from quantformer.scale.dask import _chunks

    parts = []
    for i, n in enumerate((3, 2)):
        parts.append(tmp_path / f"p{i}.csv")
        pd.DataFrame({"text": [f"t{i}{j}" for j in range(n)]}).to_csv(parts[-1], index=False)
    with pytest.warns(ParamWarning) as seen:
        rows, offsets = scan_partitions(parts, {})
        ids = [d for p, o in zip(parts, offsets) for c in _chunks(
            {"input": p, "id_offset": o, "corpus": {}}) for d in c["doc_id"]]
    assert ids == ["text1", "text2", "text3", "text4", "text5"]
    notices = [str(w.message) for w in seen if issubclass(w.category, ParamWarning)]
    assert notices == [f"partition '{parts[0]}' (and 1 more) has no id column ('doc_id', the "
                       "column read as document ids unless id_col names another): its 5 "
                       "documents are named text1..textN by their position, as quanteda names "
                       "them. To keep ids of your own, name their column with id_col"]
