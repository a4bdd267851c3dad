"""Issue 27, point 10: a binary or compressed file named .csv is refused as not text, naming
the format it looks like, instead of pandas' "C error"."""

from __future__ import annotations

import gzip
import zipfile

import pyreadr
import pytest
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.io.frames import read_frame, read_table_file


def _parquet(path, frame):
    frame.to_parquet(path)


def _gzip(path, frame):
    path.write_bytes(gzip.compress(frame.to_csv(index=False).encode()))


def _zip(path, frame):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("docs.csv", frame.to_csv(index=False))


def _rds(path, frame):
    pyreadr.write_rds(str(path), frame, compress="gzip")


def _binary(path, frame):
    path.write_bytes(b"\x00\x01\x02binary\x00" * 50)


@pytest.mark.parametrize("write, says", [
    (_parquet, "it starts like a Parquet file; rename it to .parquet or pass --format parquet"),
    (_gzip, "it starts like a gzip-compressed file (R's saveRDS() writes these too); "
            "decompress it (gunzip), or rename an R data file to .rds"),
    (_zip, "it starts like a zip archive or an Excel workbook (.xlsx); unzip it, or save the "
           "sheet as CSV (UTF-8)"),
    (_rds, "it starts like a gzip-compressed file"),
    (_binary, "(it has NUL bytes): a binary file"),
])
def test_binary_file_named_csv_says_what_it_looks_like(tmp_path, write, says):
    path = tmp_path / "docs.csv"
    write(path, toy_frame(10))
    for reader in (read_frame, read_table_file):
        with pytest.raises(InputError) as info:
            reader(path)
        assert str(info.value).startswith(f"'{path}' does not look like text")
        assert says in str(info.value)
        assert "C error" not in str(info.value)


def test_cli_exits_2_on_a_parquet_named_csv(tmp_path, capsys):
    path = tmp_path / "docs.csv"
    toy_frame(10).to_parquet(path)
    assert main(["tokenize", "--input", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"error: '{path}' does not look like text: it starts like a Parquet file" in err
    # the advice works: the same file read as Parquet
    assert len(read_frame(path, fmt="parquet")) == 10


def test_utf16_with_a_bom_is_still_text(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_bytes(toy_frame(5).to_csv(index=False).encode("utf-16"))
    with pytest.warns(Warning, match="not valid UTF-8"):
        frame = read_frame(path)
    assert frame["text"].tolist() == toy_frame(5)["text"].tolist()
