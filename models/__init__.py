"""Predictors: WillJobsArrive, NewLoadEstimate, JobDuration; training, evaluation, MLflow registry."""
