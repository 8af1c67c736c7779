"""Framework adapters: each glues a framework's hooks to the steering core and the telemetry layer."""
