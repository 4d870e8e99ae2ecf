# The environment's own sitecustomize: ldscope's hook must run it, once, as Python would.
print("own sitecustomize ran")
