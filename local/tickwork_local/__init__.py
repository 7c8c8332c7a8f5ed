"""tickwork on a laptop: the local stack, the CLI and a webhook receiver. Never shipped to Lambda."""
