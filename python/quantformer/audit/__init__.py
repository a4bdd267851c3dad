"""Layer 5 (beside train): audits of a model's answers: word attributions, their faithfulness
checks, behavioural tests.

``explain``          word attributions by Integrated Gradients: check, run, frame
``integrate``        the integration engine: path rules, baselines, batching of steps
``explain_forward``  the differentiable score of each model kind
``explain_words``    the windows a model reads and the words of the text
``explain_check``    are the attributions faithful: deletion test, model randomisation
``behave``           behavioural tests (CheckList's ideas, Ribeiro et al. 2020)
``perturb``          the English perturbation library the behavioural tests use
"""
