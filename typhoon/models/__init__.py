"""The model stage: the backbone registry and loading, the MLM head, and the fast dropout kernel."""
