"""What the runner writes: the event stream of each thread and `report.json`."""
