"""The code of every registered sia predictor (MLflow models-from-code; see sia.models.serving).

MLflow runs this file when a registered predictor is loaded with
``mlflow.pyfunc.load_model``: the predictor is rebuilt from its JSON
parameters and XGBoost boosters, and ``predict`` returns what the scheduler
uses. Nothing is unpickled.
"""

import mlflow
from mlflow.pyfunc import PythonModel


class SiaPredictor(PythonModel):
    """A sia predictor rebuilt from its artifacts."""

    def load_context(self, context):
        """Rebuild the predictor from ``context.artifacts``."""
        from sia.models import serving

        self._predictor = serving.build(dict(context.artifacts))

    def predict(self, context, model_input, params=None):
        """Return the predictor's ``serve`` of ``model_input`` (a pandas frame)."""
        return self._predictor.serve(model_input)


mlflow.models.set_model(SiaPredictor())
