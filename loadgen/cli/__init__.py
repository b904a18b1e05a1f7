"""Command lines of the load side: `embedperf run`, the headless Locust child process, local workers."""
