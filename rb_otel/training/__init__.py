"""``rb-otel train``: fit the pilot to your own agent's labelled runs, measured honestly before it is written. The
work is in :mod:`~rb_otel.training.train_model`; the data in ``dataset`` and ``features``, the fit in ``fit`` and
``logistic``, the folds in ``cv``, the thresholds in ``thresholds``, the trust gate in ``permutation``."""

from rb_otel.training.train_model import TrainingError, TrainingResult, fold_thresholds, train, train_dataset

__all__ = ["TrainingError", "TrainingResult", "fold_thresholds", "train", "train_dataset"]
