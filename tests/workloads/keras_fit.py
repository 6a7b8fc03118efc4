"""Keras 3 on the torch backend: ``fit`` with validation data, counting its own training
and test batches and epochs in a callback. Keras makes a new DataLoader for each epoch's
training and for each evaluation, both iterated with autograd on, and updates with its own
optimizer (no torch.optim step). A ``ModelCheckpoint`` saves the model (a ``.keras`` zip,
no ``torch.save``) after each epoch's validation, each save timed. Prints its counts and
the saves' times as JSON."""

import json
import os
import tempfile
import time

os.environ["KERAS_BACKEND"] = "torch"

import keras
import numpy as np


class Count(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.train = self.test = self.evals = 0

    def on_train_batch_end(self, batch, logs=None):
        self.train += 1

    def on_test_batch_end(self, batch, logs=None):
        self.test += 1

    def on_test_end(self, logs=None):
        self.evals += 1


class TimedCheckpoint(keras.callbacks.ModelCheckpoint):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.saves: list[float] = []

    def _save_model(self, epoch, batch, logs):
        t = time.perf_counter()
        super()._save_model(epoch, batch, logs)
        self.saves.append(time.perf_counter() - t)


keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1280, 32)).astype("float32")
y = (x[:, :4].sum(1) > 0).astype("int32")
model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2)]
)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
c = Count()
ckpt = TimedCheckpoint(os.path.join(tempfile.mkdtemp(), "model.keras"))
model.fit(x[:1024], y[:1024], batch_size=32, epochs=4, validation_data=(x[1024:], y[1024:]),
          callbacks=[c, ckpt], verbose=0)  # fmt: skip
print(json.dumps({"train_batches": c.train, "test_batches": c.test, "evals": c.evals,
                  "save_s": ckpt.saves}))  # fmt: skip
