"""The capacity search: its state machine, the statistics of one probe, and the record it leaves."""
