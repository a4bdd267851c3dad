"""Layer 2: from measurements to findings: prevalence and regression estimates with
prediction-powered inference, and how many gold codes are needed. Knows no model."""
