"""Layer 2: scores of predictions against codes: metrics (macro-F1, per class, regression,
multi-label), evaluation reports, calibration, intercoder reliability. Knows no model."""
