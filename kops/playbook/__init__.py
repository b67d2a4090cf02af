"""kops.playbook."""
