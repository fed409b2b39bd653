"""Producer, consumer and admin clients used by the CLI, the mirror maker, Spark and the tests."""
