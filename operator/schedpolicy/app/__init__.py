"""The two processes as a user runs them: the CLI, kopf's wiring, runtime, settings,
health, the webhook server and explain. The only layer that may import all the others.
"""
