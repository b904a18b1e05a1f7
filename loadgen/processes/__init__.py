"""Child processes started beside a run and stopped by PID: collectors, redis, the reference service."""
