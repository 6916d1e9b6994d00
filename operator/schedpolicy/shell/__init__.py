"""Everything that talks to the API server or the network: the one writer (kube), the
informer and its feeds, the writers, the scraper and the leader election. It may import
core/ and view/, never app/.
"""
