"""Securing a broker as Kafka 2.8 does: listeners and TLS (``listeners``), certificates for a private
cluster (``certs``), and the seams SASL and authorization plug into."""
