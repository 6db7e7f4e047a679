"""Request repairs: the chat request the proxy is about to send, reshaped so that the upstream's
chat template accepts it (docs/repairs.md, "What it repairs in requests").

An open-model server renders ``messages`` and ``tools`` through the model's Jinja template
before it generates, and many templates refuse shapes clients send every day (two system
messages, two user messages in a row, a tool call id Mistral's template cannot take). The
repairer (:func:`proxy.core.request_repairs.repair.repair_request`) is a pure function of the
request and what the upstream's template needs (:mod:`.needs`); it returns the request to send
and the repair kinds it applied, and a request that needs none comes back as the same object.
"""
