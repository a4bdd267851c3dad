# quantformer: the two commands of the README
#   make demo   set up, then fine-tune the bundled model on the SOTU example and evaluate it
#   make check  set up, then run every test (pytest, R CMD check with testthat, vignettes)
.PHONY: setup demo check check-python check-r site bench

setup:
	bash scripts/setup.sh

# DEMO_ARGS passes further options, e.g. make demo DEMO_ARGS="--train-docs all"
DEMO_ARGS ?=
demo: setup
	.venv/bin/python -m quantformer demo --out demo-output $(DEMO_ARGS)

check: setup
	bash scripts/check.sh

check-python: setup
	bash scripts/check.sh python

check-r: setup
	bash scripts/check.sh r

# the documentation site (pkgdown) into site/, links checked; make check builds it too
site: setup
	bash scripts/build-site.sh

bench: setup
	bash bench/run_all.sh
