"""The model code the service and the offline tools (study, benchmarks) share; it imports only the ground."""
