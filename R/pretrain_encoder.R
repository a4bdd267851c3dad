#' Pretrain an encoder further on your own unlabelled texts
#'
#' Continues the pretraining of a Transformer encoder on a corpus of uncoded documents before
#' it is fine-tuned: task-adaptive pretraining on the task's own texts, domain-adaptive
#' pretraining on a larger corpus of the domain (Gururangan et al. 2020). A researcher with
#' 50,000 uncoded speeches and 600 coded ones uses the 50,000 here and the 600 in
#' [textmodel_finetune()]. Runs `quantformer pretrain`.
#'
#' Two objectives: `"mlm"`, masked language modelling (Devlin et al. 2019; the vocabulary
#' projection computed at the masked positions only; a model without a masked-LM head gets a
#' new head, warmed up with the encoder frozen), and `"tsdae"`, the denoising auto-encoder of
#' Wang et al. (2021; 60 % of the words deleted, the text rebuilt from the sentence vector).
#' `"auto"` (default) chooses `"mlm"` for every encoder, the bundled all-MiniLM-L6-v2
#' included: one epoch on the task's own texts, then the default recipe (3 seeds), moved the
#' fine-tuned macro-F1 by -0.005, +0.001 and +0.028 with masked language modelling on
#' Abortion tweets, Toxic comments and HanDeSeT speeches, and by -0.023, -0.004 and -0.004
#' with TSDAE, which also lowered the embedding zero-shot on the first two (the package
#' repository's bench/RESULTS.md, "Further pretraining"). A gain is not assured: compare the
#' base model and the encoder on your data.
#' `"tsdae"`, the domain adaptation sentence-transformers documents for embedding models,
#' stays available for sentence-transformers bodies.
#'
#' The core reads the documents `buffer_docs` at a time. Pretraining on several
#' GPUs is a job for the command line: `torchrun --nproc_per_node N -m quantformer pretrain
#' ...` or `accelerate launch --multi_gpu --num_processes N -m quantformer pretrain ...` (NCCL
#' between GPUs; several machines and what is tested: see the command-line documentation);
#' its encoder folder is then read here with `model = "path/to/encoder"`.
#'
#' @param x unlabelled documents: a quanteda corpus, a character vector or a data frame with
#'   a text column (`text_field`); at least 100 documents with text (thousands help).
#' @param model `"default"` (the bundled all-MiniLM-L6-v2), a Hugging Face hub id or a local
#'   model folder of an encoder with a masked-LM architecture (BERT, RoBERTa, DeBERTa,
#'   ELECTRA, ...; not a GPT).
#' @param out the encoder folder to write (character; default `NULL`: a temporary folder).
#' @param objective `"auto"` (default), `"mlm"` or `"tsdae"` (see Details).
#' @param epochs passes over the documents (numeric; `NULL`: 1). Ten epochs measured no
#'   better than one for fine-tuning on the three benchmark tasks (macro-F1 -0.0105, -0.0045,
#'   +0.009 against the base, within the seeds' spread; the package repository's
#'   bench/RESULTS.md, "Further pretraining"); 100 epochs and models with a pretrained
#'   masked-LM head were not measured.
#' @param max_steps training steps instead of `epochs` (integer; `NULL`).
#' @param max_length tokens per document, special tokens included (integer, 128; at most the
#'   model's limit). A longer document is read up to it (its first `max_length` tokens); a
#'   warning before training says how many were, and the encoder's `corpus$n_truncated`.
#' @param mask_prob share of tokens masked by `"mlm"` (0.15), between 0 and 1.
#' @param whole_word logical: mask all subwords of a word together (`FALSE`; `"mlm"` only).
#' @param validation share of documents held out for the loss before and after (0.05).
#' @param seed random seed (integer, 42): the same seed gives the same encoder.
#' @param lr learning rate (`NULL`: 5e-5 for `"mlm"`, 3e-5 for `"tsdae"`).
#' @param batch_size documents per step (32).
#' @param resume logical: continue an interrupted run into `out` from its last checkpoint.
#' @param device `"auto"` (default), `"cpu"`, `"cuda"`, `"cuda:N"` or `"mps"`.
#' @param ... further flags of `quantformer pretrain` (`checkpoint_every`, `head_steps`:
#'   warm-up steps of a new masked-LM head, 0 or more, `"mlm"` only; `buffer_docs`: documents
#'   shuffled and length-grouped together, 10000).
#' @inheritParams textmodel_finetune
#' @template verbose
#' @return A `quantformer_encoder` object: `path` (the folder), `base_model`, `objective`,
#'   `objective_reason`, `corpus` (documents, tokens, sha256 hash), `valid_before` and
#'   `valid_after` (held-out loss; perplexity for `"mlm"`) and `record` (the folder's whole
#'   record). Give it as `model` to [textmodel_finetune()], [textmodel_tune()],
#'   [textmodel_compare()], [textstat_embeddings()] or [textmodel_zeroshot()]. Bad input (too
#'   few documents, a model without a masked-LM architecture, `mask_prob` outside (0, 1),
#'   `mask_prob` other than 0.15 or `whole_word = TRUE` with `objective = "tsdae"`,
#'   `max_length` above the model's limit, an existing `out`) is an error of class
#'   `quantformer_input_error` before any work.
#' @references Gururangan, S. et al. (2020). Don't Stop Pretraining: Adapt Language Models to
#'   Domains and Tasks. Proceedings of ACL.
#'
#'   Wang, K., Reimers, N. and Gurevych, I. (2021). TSDAE: Using Transformer-based Sequential
#'   Denoising Auto-Encoder for Unsupervised Sentence Embedding Learning. Findings of EMNLP.
#' @examples
#' \dontrun{
#' enc <- pretrain_encoder(uncoded_speeches, epochs = 1)
#' enc
#' fit <- textmodel_finetune(coded_speeches, y = "party", model = enc)
#' }
#' @export
pretrain_encoder <- function(x, model = "default", out = NULL,
                             objective = c("auto", "mlm", "tsdae"), epochs = NULL, max_steps = NULL, max_length = 128,
                             mask_prob = 0.15, whole_word = FALSE, validation = 0.05,
                             seed = 42, lr = NULL, batch_size = 32, resume = FALSE,
                             device = "auto", text_field = "text", docid_field = "doc_id",
                             verbose = getOption("quantformer.verbose", TRUE), ...) {
  objective <- match_choice(objective)
  frame <- as_frame(x, text_field, docid_field)
  if (is.null(out)) out <- tempfile("quantformer-encoder-")
  out <- normalizePath(out, mustWork = FALSE)
  args <- c(cli_flags(model = model, objective = objective, epochs = epochs,
                      max_steps = max_steps, max_length = max_length, mask_prob = mask_prob,
                      whole_word = whole_word, valid_fraction = validation, seed = seed,
                      lr = lr, batch_size = batch_size, resume = resume, device = device,
                      quiet = !isTRUE(verbose)),
            "--out", out, cli_flags(...))
  call_verb("pretrain", args, inputs = list("--corpus" = frame[c("doc_id", "text")]),
            verbose = verbose, r_args = names(formals()))
  load_encoder(out)
}

# A quantformer_encoder object from its folder's record, as the core reads it
# (`quantformer info --model DIR`, R/load_finetune.R).
load_encoder <- function(path) {
  rec <- model_record(path)
  structure(list(path = path, base_model = rec$base_model, objective = rec$objective,
                 objective_reason = rec$objective_reason, corpus = rec$corpus,
                 valid_before = rec$valid_before, valid_after = rec$valid_after,
                 record = rec),
            class = "quantformer_encoder")
}

#' @export
print.quantformer_encoder <- function(x, ...) {
  cat("Encoder pretrained further (", x$objective, ")\n", sep = "")
  if (!is.null(x$objective_reason))
    cat(strwrap(paste0("Objective:  ", x$objective_reason), exdent = 12), sep = "\n")
  if (isTRUE(x$record$head_warmup$new_head))
    cat("MLM head:   new (the base had none), warmed up with the encoder frozen\n")
  cat("Base model: ", x$base_model, "\n", sep = "")
  cut <- x$corpus$n_truncated
  cat("Corpus:     ", x$corpus$n_docs, " documents (", x$corpus$n_valid, " held out), ",
      x$corpus$n_tokens, " tokens read",
      if (!is.null(cut) && cut > 0)
        paste0("; ", cut, " longer than ", x$record$settings$max_length, " tokens were read ",
               "up to it"), "\n", sep = "")
  ppl <- if (!is.null(x$valid_after$perplexity))
    paste0("; perplexity ", format(x$valid_before$perplexity, digits = 5), " -> ",
           format(x$valid_after$perplexity, digits = 5))
  cat("Held-out loss: ", format(x$valid_before$loss, digits = 5), " -> ",
      format(x$valid_after$loss, digits = 5), ppl, "\n", sep = "")
  cat("Folder:     ", x$path, "\n", sep = "")
  invisible(x)
}
