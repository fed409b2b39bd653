"""Mirror maker: consume from source clusters and produce to a target cluster."""
