// Style sheets are imported for their side effect: esbuild bundles them into dist/assets/main-<hash>.css.
declare module "*.css";
