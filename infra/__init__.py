"""The CDK app that deploys tickwork: `cdk deploy` (see the README's Deploy section)."""
