"""The broker runtime: asyncio server, request dispatch, Kafka API handlers, group coordinator, controller."""
