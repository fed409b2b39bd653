"""PySpark data source and batch-load pipeline (optional extra: pip install kctl[spark])."""
