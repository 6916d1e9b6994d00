"""B8: the Kubernetes envelope (150k pods on 5k nodes), measured."""
