"""The bundled demo training (``perftop demo``); its module name, which the TUI also reads:
the demo trains until stopped, so its quit dialog starts on "Stop job"."""

TRAIN_MODULE = "perftop.demo.train"
