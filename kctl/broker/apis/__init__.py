"""One module per Kafka API the broker answers. Each starts with its behaviour and version notes and
registers ``async def handle(broker, context, request) -> response`` once, with the versions it
answers, through ``kctl.broker.apis.registry.api_handler``; the registry finds the modules itself
(what ApiVersions advertises and the broker's dispatch table are derived from it)."""
