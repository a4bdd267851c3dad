# The test helpers' skips: under QUANTFORMER_REQUIRE_PYTHON=1 a missing verb fails instead of
# skipping, and under CI=true missing shared data fails (skips must not pass silently in CI).

test_that("skip_if_no_verb fails for a missing verb when the core is required", {
  skip_if_no_python()
  withr::local_envvar(QUANTFORMER_REQUIRE_PYTHON = "1")
  expect_error(skip_if_no_verb("no-such-verb"),
               "QUANTFORMER_REQUIRE_PYTHON=1 but the Python core at .* has no 'no-such-verb' verb")
  expect_true(skip_if_no_verb("predict"))
  withr::local_envvar(QUANTFORMER_REQUIRE_PYTHON = "")
  expect_condition(skip_if_no_verb("no-such-verb"), "has no 'no-such-verb' verb yet",
                   class = "skip")
})

test_that("shared_data fails under CI=true when the data is absent, else skips", {
  withr::local_envvar(QUANTFORMER_TEST_DATA = withr::local_tempdir(), CI = "true")
  expect_error(shared_data("no-such-set"), "shared test data absent under CI=true: .*no-such-set")
  withr::local_envvar(CI = "")
  expect_condition(shared_data("no-such-set"), "shared test data absent", class = "skip")
})
