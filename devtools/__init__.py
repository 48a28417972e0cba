"""Development and demo tools, outside the product: the simulated GPU cluster and its commands."""
