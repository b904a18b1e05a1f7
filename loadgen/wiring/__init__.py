"""What Locust calls: the event listeners behind every locustfile, the User classes, the load shape."""
