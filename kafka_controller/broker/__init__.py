"""The broker process: registration, request handling, simulated replicas, controlled shutdown.

``BrokerServer`` (``server``) is one broker; ``AdminClient`` (``admin_client``) talks to the active
controller and to brokers. Both are imported from their modules: this package imports nothing
heavy.
"""
