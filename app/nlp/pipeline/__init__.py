"""Training as named stages, each a small function passing a typed result to the next.

``app.nlp.training.fit_models`` runs them in this order:

========================  =============================  ==========================================
stage                     module                         result
========================  =============================  ==========================================
data                      ``data.py``                    ``TrainingData``
splits                    ``splits.py``                  ``HeldOutPlan`` (folds or one split)
fit FastText              ``fit.py``                     ``FastTextFit`` (each fold's answers)
fit BERT                  ``fit.py``                     ``BertFit`` (one tier per fold, KB indexed)
replay held-out           ``replay.py``                  ``HeldOutReplay`` (``RouteOutcomes``)
calibrate                 ``calibrate.py``               ``Calibrated``
tune                      ``tune.py``                    ``Tuned`` (thresholds, tiers)
refit                     ``refit.py``                   ``ServingModels``
traffic                   ``traffic.py``                 ``Tuned`` (``tau_review`` on traffic)
publish                   ``publish.py``                 ``TrainedModels`` (what a version saves)
========================  =============================  ==========================================

No stage changes another's result; ``kb.py`` holds the KB as each tier indexes it (used by the
stages and by the engine), ``progress.py`` the bar that names the running stage.
"""
