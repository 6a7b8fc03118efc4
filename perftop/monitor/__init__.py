"""The monitor process: socket server, ingest loop, job runner, output capture."""
