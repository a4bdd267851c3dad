# pretrain_encoder(): `quantformer pretrain` of the bundled all-MiniLM-L6-v2 (masked LM, one step).

test_that("issue 33: pretrain_encoder() gives an encoder textmodel_finetune() takes", {
  skip_if_no_verb("pretrain")
  texts <- paste("The committee discussed taxes, schools and energy, item", seq_len(110))
  enc <- pretrain_encoder(texts, max_steps = 1, batch_size = 16, max_length = 32,
                          device = "cpu", verbose = FALSE)
  expect_s3_class(enc, "quantformer_encoder")
  expect_equal(enc$objective, "mlm")  # auto: masked LM, also for a sentence-transformers body
  expect_match(enc$objective_reason, "Gururangan et al. \\(2020\\)")
  expect_equal(enc$corpus$n_docs, 110L)
  expect_equal(enc$corpus$n_valid, 6L)
  expect_true(enc$record$head_warmup$new_head)  # the bundled body has no masked-LM head
  expect_true(enc$valid_before$loss > 0 && enc$valid_after$loss != enc$valid_before$loss)
  expect_output(print(enc), "110 documents")
  expect_output(print(enc), "all-MiniLM-L6-v2")
  expect_output(print(enc), "Objective: +masked language modelling")
  expect_output(print(enc), "MLM head: +new \\(the base had none\\)")
  emb <- textstat_embeddings(c(a = "taxes and schools", b = "energy"), model = enc,
                             device = "cpu", verbose = FALSE)
  expect_equal(dim(emb), c(2L, 384L))
  # the encoder's own tokenizer counts the windows (a one-word document: [CLS], word, [SEP])
  sw <- textstat_subwords(c(a = "taxes", b = strrep("taxes and schools ", 40)), model = enc,
                          truncation = "chunks", max_length = 32)
  expect_equal(sw$n_tokens[1], 3L)
  expect_gt(sw$n_windows[2], 1L)
  train <- data.frame(text = c(paste("taxes", 1:8), paste("schools", 1:8)),
                      label = rep(c("econ", "edu"), each = 8))
  fit <- textmodel_finetune(train, y = "label", model = enc, epochs = 1, max_length = 32,
                            device = "cpu", verbose = FALSE)
  expect_s3_class(fit, "textmodel_finetune")
  expect_equal(levels(predict(fit)), c("econ", "edu"))
})

test_that("pretrain_encoder() refuses too few documents and a bad mask_prob before any work", {
  skip_if_no_verb("pretrain")
  out <- tempfile("enc-")
  expect_error(pretrain_encoder(paste("text", 1:50), out = out, verbose = FALSE),
               "only 50 documents with text", class = "quantformer_input_error")
  expect_error(pretrain_encoder(paste("text", 1:150), out = out, mask_prob = 2,
                                verbose = FALSE),
               "`mask_prob` must be between 0 and 1 \\(exclusive\\), not 2;",
               class = "quantformer_input_error")
  expect_false(file.exists(out))
})
