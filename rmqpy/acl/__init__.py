"""ACL 1.0 (aclEnable=true): plain_acl.yml accounts, white addresses and signatures."""
