"""Child processes started beside a run and stopped by PID: collectors, redis, the reference service,
and the dry-run target (stub_target) that measures the generator without a model."""
