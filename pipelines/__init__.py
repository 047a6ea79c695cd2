"""Stages wired together (ingest, features, train, evaluate), the `sia` CLI, MLflow, executors."""
