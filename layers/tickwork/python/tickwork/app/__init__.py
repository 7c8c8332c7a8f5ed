"""The engine: the API's service, the planner, the worker and the sweeper, on ports only."""
