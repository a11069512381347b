// selenium-webdriver's http module by the path Node's ES module loader needs (it has no "exports"
// map, so "selenium-webdriver/http" is a directory import that Node refuses), typed as
// @types/selenium-webdriver types it (its http.d.ts).
declare module "selenium-webdriver/http/index.js" {
  export { Executor, HttpClient } from "selenium-webdriver/http.js";
}
