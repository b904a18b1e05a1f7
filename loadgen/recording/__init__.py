"""What a run records while it runs: request rows, the live view and export, the generator's own CPU."""
