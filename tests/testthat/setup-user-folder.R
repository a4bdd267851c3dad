# Models fitted without `output_dir` go to tools::R_user_dir("quantformer", "data"): the tests
# point it at a temporary folder so that nothing lands in the real per-user folder.
withr::local_envvar(R_USER_DATA_DIR = withr::local_tempdir("qf-user-data-",
                                                           .local_envir = testthat::teardown_env()),
                    .local_envir = testthat::teardown_env())
