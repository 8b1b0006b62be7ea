"""Kafka's binary protocol, the slice a broker answers today: ApiVersions, Metadata, DescribeCluster.

``primitives`` has the wire types, ``header`` the request/response headers and the supported API
table, one module per API its request and response codecs, and ``handler`` the broker's answers.
"""
