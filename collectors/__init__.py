"""1 Hz telemetry collectors (npu-smi, NVML, host, service /metrics, Prometheus) writing into a run folder."""
