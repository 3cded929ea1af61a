"""slide's rclpy nodes: thin shells around slide_core (see each node module)."""
